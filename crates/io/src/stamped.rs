//! Receiving with the kernel's arrival timestamp (`SO_TIMESTAMPNS`).
//!
//! A process that reads its socket only when it is ready, rather than waking for every
//! datagram, still learns when each datagram arrived. The bots use this: they sleep to
//! their own send deadlines instead of waiting on their sockets, so the server's sends
//! over loopback do not pay for waking them (a cost a real client across a network would
//! never put on the server), and their response times are still measured to the
//! microsecond.
//!
//! The portable path has no kernel stamps: enabling them succeeds and changes nothing, and
//! every stamp is `None`, so a caller falls back to the time it read the datagram (a
//! development server's bots measure a little late; nothing else changes).

use std::io;
use std::net::SocketAddr;

pub use crate::arrival::{realtime_now, ArrivalTime};
use crate::udp::UdpSocket;

#[cfg(not(linux_io))]
impl UdpSocket {
    /// Does nothing on the portable path, which has no kernel arrival stamps.
    pub fn enable_rx_timestamps(&self) -> io::Result<()> {
        Ok(())
    }

    /// Unsupported on the portable path: no datagram says where it was sent to.
    pub fn enable_destinations(&self) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "datagram destinations (IP_PKTINFO) need the Linux I/O path",
        ))
    }

    /// Receives one datagram; `Ok(None)` when none is waiting. The time is always `None`
    /// on the portable path.
    pub fn recv_stamped(
        &self,
        buf: &mut [u8],
    ) -> io::Result<Option<(usize, SocketAddr, Option<ArrivalTime>)>> {
        Ok(self.recv_from(buf)?.map(|(n, from)| (n, from, None)))
    }
}

#[cfg(linux_io)]
impl UdpSocket {
    /// Asks the kernel to say which local IPv4 address each datagram this socket receives
    /// was sent to (`IP_PKTINFO`; [`crate::udp::RecvBatch::destination`]), for a socket bound
    /// to the wildcard address that stands for many local addresses.
    pub fn enable_destinations(&self) -> io::Result<()> {
        self.set_int_option(libc::IPPROTO_IP, libc::IP_PKTINFO)
    }

    /// Asks the kernel to stamp every datagram this socket receives with its arrival time.
    pub fn enable_rx_timestamps(&self) -> io::Result<()> {
        self.set_int_option(libc::SOL_SOCKET, libc::SO_TIMESTAMPNS)
    }

    /// Turns on the boolean option `name` at `level`.
    fn set_int_option(&self, level: libc::c_int, name: libc::c_int) -> io::Result<()> {
        use std::mem;
        use std::os::fd::AsRawFd;
        let on: libc::c_int = 1;
        // SAFETY: setsockopt reads one c_int from a pointer valid for its size.
        let r = unsafe {
            libc::setsockopt(
                self.as_raw_fd(),
                level,
                name,
                (&on as *const libc::c_int).cast(),
                mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Receives one datagram with its arrival time; `Ok(None)` when none is waiting. The
    /// time is `None` when timestamps are not enabled or the kernel gave none.
    pub fn recv_stamped(
        &self,
        buf: &mut [u8],
    ) -> io::Result<Option<(usize, SocketAddr, Option<ArrivalTime>)>> {
        use crate::arrival::stamp_of;
        use crate::udp::read_sockaddr;
        use std::mem;
        use std::os::fd::AsRawFd;
        // Room for one timespec control message, aligned for cmsghdr.
        let mut control = [0u64; 8];
        // SAFETY: all-zero bytes are valid for these C structs.
        let mut name: libc::sockaddr_storage = unsafe { mem::zeroed() };
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: as above.
        let mut msg: libc::msghdr = unsafe { mem::zeroed() };
        msg.msg_name = (&mut name as *mut libc::sockaddr_storage).cast();
        msg.msg_namelen = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = mem::size_of_val(&control) as _;
        // SAFETY: every pointer in `msg` points into locals that outlive the call, with the
        // lengths given; the kernel writes at most those lengths.
        let n = unsafe { libc::recvmsg(self.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::WouldBlock {
                Ok(None)
            } else {
                Err(e)
            };
        }
        let Some(from) = read_sockaddr(&name, msg.msg_namelen) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "unreadable source address",
            ));
        };
        // SAFETY: the kernel just filled `control`, which `msg` describes.
        let stamp = unsafe { stamp_of(&msg) };
        Ok(Some((n as usize, from, stamp)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::udp::SocketOptions;
    use std::time::{Duration, Instant};

    #[test]
    fn arrival_times_are_stamped_between_send_and_read() {
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let a = UdpSocket::bind(any, SocketOptions::default()).unwrap();
        let b = UdpSocket::bind(any, SocketOptions::default()).unwrap();
        b.enable_rx_timestamps().unwrap();
        let before = realtime_now();
        a.send_to(b"stamp me", b.local_addr().unwrap()).unwrap();
        crate::udp::wait_readable(&[&b], Duration::from_secs(5)).unwrap();
        let mut buf = [0u8; 64];
        let (n, from, stamp) = b.recv_stamped(&mut buf).unwrap().expect("a datagram");
        let after = realtime_now();
        assert_eq!(
            (&buf[..n], from),
            (&b"stamp me"[..], a.local_addr().unwrap())
        );
        if !crate::LINUX_PATH {
            assert_eq!(stamp, None, "the portable path has no kernel stamps");
            assert_eq!(b.recv_stamped(&mut buf).unwrap(), None);
            return;
        }
        let stamp = stamp.expect("a timestamp");
        // The realtime clock may be stepped, but not within these microseconds.
        assert!(
            stamp.0 >= before - Duration::from_millis(1) && stamp.0 <= after,
            "{before:?} {stamp:?} {after:?}"
        );
        assert_eq!(b.recv_stamped(&mut buf).unwrap(), None);
    }

    #[test]
    fn a_stamped_batch_reads_several_datagrams_and_their_stamps_in_one_call() {
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let a = UdpSocket::bind(any, SocketOptions::default()).unwrap();
        let b = UdpSocket::bind(any, SocketOptions::default()).unwrap();
        b.enable_rx_timestamps().unwrap();
        let before = realtime_now();
        for i in 0..3u8 {
            a.send_to(&[i; 5], b.local_addr().unwrap()).unwrap();
        }
        let mut batch = crate::udp::RecvBatch::with_timestamps(8);
        let mut stats = crate::udp::IoStats::default();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut got = Vec::new();
        while got.len() < 3 && Instant::now() < deadline {
            crate::udp::wait_readable(&[&b], Duration::from_millis(100)).unwrap();
            batch.fill(&b, &mut stats);
            for i in 0..batch.len() {
                let (from, bytes) = batch.get(i);
                assert_eq!(from, a.local_addr().unwrap());
                got.push((bytes.to_vec(), batch.arrival(i)));
            }
        }
        let after = realtime_now();
        assert_eq!(
            got.iter().map(|g| g.0.clone()).collect::<Vec<_>>(),
            vec![vec![0; 5], vec![1; 5], vec![2; 5]]
        );
        for (_, stamp) in &got {
            if !crate::LINUX_PATH {
                assert_eq!(*stamp, None, "the portable path has no kernel stamps");
                continue;
            }
            let stamp = stamp.expect("a stamp");
            assert!(stamp.0 >= before - Duration::from_millis(1) && stamp.0 <= after);
        }
        // Loopback delivers at send time: all three were waiting for one call (on Linux;
        // the portable path takes one per datagram and one more to find the socket empty).
        let most = if crate::LINUX_PATH { 2 } else { 5 };
        assert!(stats.recv_calls <= most, "{} calls", stats.recv_calls);
        // A batch made without timestamps reads none.
        a.send_to(b"x", b.local_addr().unwrap()).unwrap();
        let mut plain = crate::udp::RecvBatch::with_capacity(4);
        crate::udp::wait_readable(&[&b], Duration::from_secs(5)).unwrap();
        assert_eq!(plain.fill(&b, &mut stats), 1);
        assert_eq!(plain.arrival(0), None);
    }

    #[test]
    fn a_stamp_maps_back_onto_the_monotonic_clock() {
        let now = Instant::now();
        let real = Duration::from_secs(1_000);
        let stamp = ArrivalTime(real - Duration::from_millis(3));
        assert_eq!(stamp.to_instant(now, real), now - Duration::from_millis(3));
        assert_eq!(
            ArrivalTime(real + Duration::from_millis(1)).to_instant(now, real),
            now
        );
    }
}
