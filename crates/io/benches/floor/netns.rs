//! Two network namespaces joined by a veth pair, made for one run and always removed.
//!
//! A socket belongs to the namespace of the thread that created it, for its whole life, so
//! a short-lived thread enters a namespace (`setns(CLONE_NEWNET)`), binds, and hands the
//! socket back. Only private addresses on the pair itself are configured: no route leaves
//! the two namespaces.

use std::fs::File;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};

use tickforge_io::udp::{SocketOptions, UdpSocket};

const NAMESPACES: [&str; 2] = ["tickforge-floor-a", "tickforge-floor-b"];
const LINKS: [&str; 2] = ["tf-floor-a", "tf-floor-b"];
const ADDRS: [Ipv4Addr; 2] = [Ipv4Addr::new(10, 213, 0, 1), Ipv4Addr::new(10, 213, 0, 2)];

/// One end of the pair.
#[derive(Clone, Copy)]
pub enum Side {
    A = 0,
    B = 1,
}

/// The namespaces and the pair; dropping it deletes them, on a panic too.
pub struct Veth(());

impl Veth {
    /// Makes both namespaces and the pair, first removing any left by a run that was killed.
    pub fn up() -> io::Result<Veth> {
        tear_down();
        // From here on the guard removes whatever part was made.
        let veth = Veth(());
        for ns in NAMESPACES {
            ip(&["netns", "add", ns])?;
        }
        ip(&[
            "link",
            "add",
            LINKS[0],
            "netns",
            NAMESPACES[0],
            "type",
            "veth",
            "peer",
            "name",
            LINKS[1],
            "netns",
            NAMESPACES[1],
        ])?;
        for side in [Side::A, Side::B] {
            let (ns, link) = (NAMESPACES[side as usize], LINKS[side as usize]);
            let addr = format!("{}/30", ADDRS[side as usize]);
            ip(&["-n", ns, "addr", "add", &addr, "dev", link])?;
            ip(&["-n", ns, "link", "set", link, "up"])?;
        }
        Ok(veth)
    }

    /// The address of `side`, port 0.
    pub fn addr(&self, side: Side) -> SocketAddr {
        SocketAddr::from((ADDRS[side as usize], 0))
    }

    /// A socket bound to `side`'s address in `side`'s namespace.
    pub fn bind(&self, side: Side) -> io::Result<UdpSocket> {
        let ns = NAMESPACES[side as usize];
        let addr = self.addr(side);
        std::thread::scope(|s| {
            s.spawn(|| {
                let handle = File::open(format!("/var/run/netns/{ns}"))?;
                // SAFETY: setns on a namespace file we hold open; it changes only this
                // thread, which ends right after binding.
                if unsafe { libc::setns(handle.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    return Err(io::Error::last_os_error());
                }
                UdpSocket::bind(addr, SocketOptions::default())
            })
            .join()
            .expect("the binding thread does not panic")
        })
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        tear_down();
    }
}

/// Deletes both namespaces (which takes the pair with them) and the pair, should it have
/// been left outside them; each step may find nothing to delete.
fn tear_down() {
    for ns in NAMESPACES {
        let _ = quiet(&["netns", "del", ns]);
    }
    let _ = quiet(&["link", "del", LINKS[0]]);
}

fn ip(args: &[&str]) -> io::Result<()> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

fn quiet(args: &[&str]) -> io::Result<std::process::ExitStatus> {
    Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
}
