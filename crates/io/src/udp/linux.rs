//! The Linux path of [`crate::udp`]: a batch crosses into the kernel in one `recvmmsg(2)` or
//! `sendmmsg(2)` call, with the kernel's arrival stamps read from each message's control
//! buffer. Chosen at compile time (`cfg(linux_io)`, see the crate's build script); the
//! portable path beside it has the same API.

use std::ffi::c_void;
use std::io;
use std::mem::{self, size_of};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::AsRawFd;
use std::ptr;
use std::time::Duration;

use socket2::Socket;

use super::{recv_failed, IoStats, Received, RecvBatch, SendBatch, UdpSocket, SLOT_BYTES};
use crate::arrival::stamp_of;

/// Messages one `recvmmsg`/`sendmmsg` call takes at most: the kernel clamps its count to
/// UIO_MAXIOV.
pub(super) const MAX_MSGS_PER_CALL: usize = libc::UIO_MAXIOV as usize;

// The kernel reads and writes socket addresses through a sockaddr_storage; the conversions
// below rely on it holding either family at its start.
const _: () = assert!(
    size_of::<libc::sockaddr_in>() <= size_of::<libc::sockaddr_storage>()
        && size_of::<libc::sockaddr_in6>() <= size_of::<libc::sockaddr_storage>()
        && mem::align_of::<libc::sockaddr_in>() <= mem::align_of::<libc::sockaddr_storage>()
        && mem::align_of::<libc::sockaddr_in6>() <= mem::align_of::<libc::sockaddr_storage>()
);

/// Sets the IPv4 don't-fragment bit on every datagram, ignoring path MTU discovery
/// (`IP_PMTUDISC_PROBE`): game datagrams are sized to fit any path, a lost fragment would
/// lose the whole datagram anyway, and a DF datagram needs no IP id, which the kernel
/// otherwise draws for each one from a hash table shared by every core (1.2% of a busy
/// worker core's profile at 20 matches, gone with DF).
pub(super) fn dont_fragment(socket: &Socket) -> io::Result<()> {
    let mode: libc::c_int = libc::IP_PMTUDISC_PROBE;
    // SAFETY: setsockopt reads one c_int we own for the socket's own option.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            (&mode as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sockets [`super::wait_readable`] takes at once, on the stack: no allocation per wait.
const MAX_WAIT_SOCKETS: usize = 64;

/// [`super::wait_readable`] by `ppoll(2)`, which unlike `poll` takes nanoseconds, so a
/// wait for a tick deadline is not rounded up to a millisecond.
pub(super) fn wait_readable(sockets: &[&UdpSocket], timeout: Duration) -> io::Result<usize> {
    if sockets.len() > MAX_WAIT_SOCKETS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "wait_readable takes at most 64 sockets",
        ));
    }
    let mut fds = [libc::pollfd {
        fd: -1,
        events: 0,
        revents: 0,
    }; MAX_WAIT_SOCKETS];
    for (p, s) in fds.iter_mut().zip(sockets) {
        p.fd = s.as_raw_fd();
        p.events = libc::POLLIN;
    }
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: `fds` is a valid array of pollfd, of which the first `sockets.len()` are
    // passed; `ts` outlives the call; a null signal mask leaves the mask unchanged.
    let n = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            sockets.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(0)
        } else {
            Err(e)
        };
    }
    Ok(n as usize)
}

/// Message headers and their iovecs for one `recvmmsg`/`sendmmsg` call.
///
/// Only the memory is kept between calls: every pointer inside is written just before a
/// call, from buffers the owning batch holds, and read only by the kernel during it. So a
/// batch can move freely; between calls the pointers are stale and nothing reads them.
struct MsgHeaders {
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
}

// SAFETY: the raw pointers inside opt this type out of Send and Sync, but they are never
// dereferenced by Rust code, and the kernel reads them only during a call made by a `&mut`
// method of the owning batch that rewrote them first. Moving or sharing a `MsgHeaders`
// across threads therefore gives no thread access to memory it does not own.
unsafe impl Send for MsgHeaders {}
// SAFETY: as for Send; shared access can read the pointer values, never their targets.
unsafe impl Sync for MsgHeaders {}

impl MsgHeaders {
    fn with_len(n: usize) -> Self {
        // SAFETY: mmsghdr and iovec are C structs of integers and raw pointers, for which
        // all-zero bytes are valid values (null pointers, zero lengths).
        let (hdr, iov) = unsafe { (mem::zeroed::<libc::mmsghdr>(), mem::zeroed::<libc::iovec>()) };
        MsgHeaders {
            hdrs: vec![hdr; n],
            iovs: vec![iov; n],
        }
    }

    fn len(&self) -> usize {
        self.hdrs.len()
    }
}

/// Points `hdr` at one socket address and one iovec, clearing what the last call left.
fn set_header(
    hdr: &mut libc::mmsghdr,
    name: &mut libc::sockaddr_storage,
    namelen: libc::socklen_t,
    iov: &mut libc::iovec,
) {
    hdr.msg_hdr.msg_name = (name as *mut libc::sockaddr_storage).cast::<c_void>();
    hdr.msg_hdr.msg_namelen = namelen;
    hdr.msg_hdr.msg_iov = iov;
    hdr.msg_hdr.msg_iovlen = 1;
    hdr.msg_hdr.msg_control = ptr::null_mut();
    hdr.msg_hdr.msg_controllen = 0;
    hdr.msg_hdr.msg_flags = 0;
    hdr.msg_len = 0;
}

fn zeroed_storage() -> libc::sockaddr_storage {
    // SAFETY: sockaddr_storage is a C struct of integers; all-zero bytes are a valid value.
    unsafe { mem::zeroed() }
}

/// Room for the control messages of a received datagram, aligned for cmsghdr: its arrival
/// stamp (a timespec, 32 bytes with its header) and where it was sent to (an in_pktinfo,
/// 32 bytes), with room to spare.
type Control = [u64; 12];

/// Room for one outgoing `IP_PKTINFO` control message: CMSG_SPACE of an in_pktinfo.
type SourceControl = [u64; 4];
const _: () = assert!(
    mem::size_of::<libc::cmsghdr>() + mem::size_of::<libc::in_pktinfo>()
        <= mem::size_of::<SourceControl>()
);

/// The IPv4 address a received datagram was sent to, from its `IP_PKTINFO` control message.
///
/// # Safety
/// `msg.msg_control` must point at `msg.msg_controllen` readable bytes that the kernel
/// filled as a control buffer (or be null with a length of 0).
unsafe fn destination_of(msg: &libc::msghdr) -> Option<Ipv4Addr> {
    let mut to = None;
    // SAFETY: the CMSG_* macros walk the control buffer the kernel filled, bounded by
    // msg_controllen (the caller's promise); CMSG_DATA of an IP_PKTINFO message holds one
    // in_pktinfo, read unaligned because nothing promises its alignment.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::IPPROTO_IP && (*c).cmsg_type == libc::IP_PKTINFO {
                let info: libc::in_pktinfo = ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                // ipi_addr: the header's destination address, in network order.
                to = Some(Ipv4Addr::from(info.ipi_addr.s_addr.to_ne_bytes()));
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    to
}

/// What a [`RecvBatch`] keeps for `recvmmsg`: the source address the kernel writes for
/// each slot, each slot's control buffer (for arrival stamps; empty: the batch takes
/// none), and the message headers of one call.
pub(super) struct RecvState {
    names: Vec<libc::sockaddr_storage>,
    controls: Vec<Control>,
    msgs: MsgHeaders,
}

impl RecvState {
    pub(super) fn new(capacity: usize, per_call: usize) -> Self {
        RecvState {
            names: vec![zeroed_storage(); capacity],
            controls: Vec::new(),
            msgs: MsgHeaders::with_len(capacity.min(per_call)),
        }
    }

    /// Gives each of `capacity` slots a control buffer, so that fills read arrival stamps.
    pub(super) fn take_timestamps(&mut self, capacity: usize) {
        self.controls = vec![[0; 12]; capacity];
    }
}

/// What a [`SendBatch`] keeps for `sendmmsg`: the destination addresses and message
/// headers of one call.
pub(super) struct SendState {
    names: Vec<libc::sockaddr_storage>,
    /// Each message's `IP_PKTINFO`, for those queued with a source address.
    controls: Vec<SourceControl>,
    msgs: MsgHeaders,
}

impl SendState {
    pub(super) fn new(per_call: usize) -> Self {
        SendState {
            names: vec![zeroed_storage(); per_call],
            controls: vec![[0; 4]; per_call],
            msgs: MsgHeaders::with_len(per_call),
        }
    }
}

/// Writes an `IP_PKTINFO` control message that sends from `from` into `control`, and points
/// `hdr` at it.
fn set_source(hdr: &mut libc::mmsghdr, control: &mut SourceControl, from: Ipv4Addr) {
    *control = [0; 4];
    hdr.msg_hdr.msg_control = control.as_mut_ptr().cast::<c_void>();
    // SAFETY: CMSG_SPACE is arithmetic on a constant size.
    hdr.msg_hdr.msg_controllen =
        unsafe { libc::CMSG_SPACE(size_of::<libc::in_pktinfo>() as u32) } as _;
    let info = libc::in_pktinfo {
        ipi_ifindex: 0,
        // The source address to send from, in network order.
        ipi_spec_dst: libc::in_addr {
            s_addr: u32::from_ne_bytes(from.octets()),
        },
        ipi_addr: libc::in_addr { s_addr: 0 },
    };
    // SAFETY: the header now points at `control`, which is aligned for cmsghdr and holds
    // CMSG_SPACE(in_pktinfo) bytes (asserted above), so CMSG_FIRSTHDR gives its start and
    // CMSG_DATA a place for one in_pktinfo inside it, written unaligned.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&hdr.msg_hdr);
        (*c).cmsg_level = libc::IPPROTO_IP;
        (*c).cmsg_type = libc::IP_PKTINFO;
        (*c).cmsg_len = libc::CMSG_LEN(size_of::<libc::in_pktinfo>() as u32) as _;
        ptr::write_unaligned(libc::CMSG_DATA(c).cast::<libc::in_pktinfo>(), info);
    }
}

impl RecvBatch {
    ///
    /// One `recvmmsg` call normally does it all; call again while [`RecvBatch::is_full`].
    /// Failed calls are counted in [`IoStats::recv_errors`] and retried a few times.
    ///
    /// Each call first points one header at every free slot, about a nanosecond a slot, so
    /// a batch far larger than a wake-up's traffic costs a little even on an empty socket.
    pub fn fill(&mut self, socket: &UdpSocket, stats: &mut IoStats) -> usize {
        self.received.clear();
        self.slots_used = 0;
        let capacity = self.capacity;
        let mut failed_calls = 0;
        while self.slots_used < capacity {
            let first = self.slots_used;
            let want = (capacity - first).min(self.sys.msgs.len());
            let slots = self.data[first * SLOT_BYTES..(first + want) * SLOT_BYTES]
                .chunks_exact_mut(SLOT_BYTES);
            let names = &mut self.sys.names[first..first + want];
            for (k, (((slot, name), iov), hdr)) in slots
                .zip(names)
                .zip(&mut self.sys.msgs.iovs)
                .zip(&mut self.sys.msgs.hdrs)
                .enumerate()
            {
                *iov = libc::iovec {
                    iov_base: slot.as_mut_ptr().cast::<c_void>(),
                    iov_len: slot.len(),
                };
                set_header(hdr, name, STORAGE_BYTES, iov);
                if let Some(control) = self.sys.controls.get_mut(first + k) {
                    hdr.msg_hdr.msg_control = control.as_mut_ptr().cast::<c_void>();
                    hdr.msg_hdr.msg_controllen = mem::size_of::<Control>() as _;
                }
            }
            stats.recv_calls += 1;
            // SAFETY: each of the first `want` headers points at one sockaddr_storage of
            // `self.sys.names` with its true size, and at one iovec describing one whole slot of
            // `self.data`. All of them are owned by `self`, which is borrowed mutably for
            // the call, so they outlive it and nothing else touches them. MSG_DONTWAIT
            // makes the call return at once; a null timeout is allowed.
            let n = unsafe {
                libc::recvmmsg(
                    socket.as_raw_fd(),
                    self.sys.msgs.hdrs.as_mut_ptr(),
                    want as libc::c_uint,
                    libc::MSG_DONTWAIT,
                    ptr::null_mut(),
                )
            };
            if n < 0 {
                if recv_failed(&io::Error::last_os_error(), &mut failed_calls, stats) {
                    break;
                }
                continue;
            }
            let n = (n as usize).min(want);
            for (k, hdr) in self.sys.msgs.hdrs[..n].iter().enumerate() {
                let slot = first + k;
                // Without MSG_TRUNC among the call's flags, msg_len is what was copied,
                // never more than the slot; the min keeps slicing in bounds regardless.
                let len = (hdr.msg_len as usize).min(SLOT_BYTES);
                let truncated = hdr.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
                let Some(from) = read_sockaddr(&self.sys.names[slot], hdr.msg_hdr.msg_namelen)
                else {
                    stats.recv_errors += 1;
                    continue;
                };
                let (stamp, to) = if self.sys.controls.is_empty() {
                    (None, None)
                } else {
                    // SAFETY: this header's control points at `self.sys.controls[slot]`, of
                    // the length the kernel left there, and the call just filled it.
                    unsafe { (stamp_of(&hdr.msg_hdr), destination_of(&hdr.msg_hdr)) }
                };
                stats.received += 1;
                stats.bytes_in += len as u64;
                stats.truncated += u64::from(truncated);
                self.received.push(Received {
                    from,
                    to,
                    slot,
                    len,
                    truncated,
                    stamp,
                });
            }
            self.slots_used += n;
            // Fewer than asked: the socket is empty, or an error is pending that the next
            // call reports (and poll wakes the caller for).
            if n < want {
                break;
            }
        }
        self.received.len()
    }
}

impl SendBatch {
    /// Sends everything queued and empties the batch; returns datagrams sent.
    ///
    /// One `sendmmsg` call normally sends it all. When the kernel takes only part, the rest
    /// goes in further calls. A datagram the kernel refuses is counted in
    /// [`IoStats::send_errors`] and skipped; when the socket's send buffer is full
    /// (`WouldBlock`) everything still queued is counted as loss, since an immediate retry
    /// would meet the same full buffer.
    pub fn flush(&mut self, socket: &UdpSocket, stats: &mut IoStats) -> usize {
        let mut next = 0;
        let mut sent = 0;
        while next < self.queued.len() {
            let want = (self.queued.len() - next).min(self.sys.msgs.len());
            for ((((q, name), iov), hdr), control) in self.queued[next..next + want]
                .iter()
                .zip(&mut self.sys.names)
                .zip(&mut self.sys.msgs.iovs)
                .zip(&mut self.sys.msgs.hdrs)
                .zip(&mut self.sys.controls)
            {
                let namelen = write_sockaddr(q.to, name);
                let bytes = &self.data[q.start..q.start + q.len];
                *iov = libc::iovec {
                    // sendmmsg only reads through it; iovec has one pointer type for both
                    // directions.
                    iov_base: bytes.as_ptr().cast_mut().cast::<c_void>(),
                    iov_len: bytes.len(),
                };
                set_header(hdr, name, namelen, iov);
                if let Some(from) = q.from {
                    set_source(hdr, control, from);
                }
            }
            stats.send_calls += 1;
            // SAFETY: each of the first `want` headers points at one sockaddr_storage of
            // `self.sys.names` holding an address of the length given, at one iovec
            // describing bytes inside `self.data`, and at no control buffer or one of
            // `self.sys.controls` holding one IP_PKTINFO message. All are owned by `self`,
            // which is borrowed mutably for the call, so they outlive it and nothing else
            // touches them; the kernel only reads the data.
            let n = unsafe {
                libc::sendmmsg(
                    socket.as_raw_fd(),
                    self.sys.msgs.hdrs.as_mut_ptr(),
                    want as libc::c_uint,
                    0,
                )
            };
            if n > 0 {
                let n = (n as usize).min(want);
                for q in &self.queued[next..next + n] {
                    stats.bytes_out += q.len as u64;
                }
                stats.sent += n as u64;
                sent += n;
                next += n;
            } else if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock {
                stats.send_errors += (self.queued.len() - next) as u64;
                break;
            } else {
                // The kernel refused the first datagram of the call: it alone is lost.
                stats.send_errors += 1;
                next += 1;
            }
        }
        self.data.clear();
        self.queued.clear();
        sent
    }
}

const STORAGE_BYTES: libc::socklen_t = size_of::<libc::sockaddr_storage>() as libc::socklen_t;

/// Writes `addr` into `out` in the kernel's layout; returns how many bytes of `out` it uses.
///
/// Ports go in network byte order; the IPv6 flow label and scope id go in as `std` and
/// socket2 put them, so an address read back compares equal.
pub(super) fn write_sockaddr(
    addr: SocketAddr,
    out: &mut libc::sockaddr_storage,
) -> libc::socklen_t {
    match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    // The octets in memory order are network order.
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: `out` is a valid, exclusive sockaddr_storage, which is at least as
            // large and as aligned as sockaddr_in (asserted at the top of the module).
            unsafe { ptr::write((out as *mut libc::sockaddr_storage).cast(), sin) };
            size_of::<libc::sockaddr_in>() as libc::socklen_t
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: as for sockaddr_in.
            unsafe { ptr::write((out as *mut libc::sockaddr_storage).cast(), sin6) };
            size_of::<libc::sockaddr_in6>() as libc::socklen_t
        }
    }
}

/// The address the kernel wrote into `name`, of which it reported `len` bytes; `None` for a
/// family other than IPv4 and IPv6, or a length too short for its family.
pub(crate) fn read_sockaddr(
    name: &libc::sockaddr_storage,
    len: libc::socklen_t,
) -> Option<SocketAddr> {
    let len = len as usize;
    match libc::c_int::from(name.ss_family) {
        libc::AF_INET if len >= size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family says `name` starts with a sockaddr_in, and the kernel says
            // it wrote all of it. sockaddr_storage is at least as large and as aligned, and
            // every field of sockaddr_in is an integer, so any initialized bytes (the
            // storage is never uninitialized) are a valid value.
            let sin =
                unsafe { &*(name as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes()),
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 if len >= size_of::<libc::sockaddr_in6>() => {
            // SAFETY: as for sockaddr_in.
            let sin6 =
                unsafe { &*(name as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_addresses_convert_both_ways_in_both_families() {
        let addrs = [
            "127.0.0.1:9000".parse().unwrap(),
            "0.0.0.0:0".parse().unwrap(),
            "203.0.113.7:65535".parse().unwrap(),
            "[::1]:443".parse().unwrap(),
            "[::ffff:192.0.2.1]:53".parse().unwrap(),
            SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::new(0xfe80, 0, 0, 0, 0x1234, 0x5678, 0x9abc, 0xdef0),
                1,
                0x000a_bcde,
                3,
            )),
        ];
        for addr in addrs {
            let mut name = zeroed_storage();
            let len = write_sockaddr(addr, &mut name);
            assert_eq!(read_sockaddr(&name, len), Some(addr));

            // socket2 converts independently: its layout must match ours both ways.
            let theirs = socket2::SockAddr::from(addr);
            // SAFETY: `name` holds an address of `len` bytes, written just above.
            let ours = unsafe { socket2::SockAddr::new(name, len) };
            assert_eq!(ours, theirs, "{addr}");
            assert_eq!(
                read_sockaddr(&theirs.clone().as_storage(), theirs.len()),
                Some(addr)
            );

            // One byte short of its family is unreadable.
            assert_eq!(read_sockaddr(&name, len - 1), None);
        }
        let mut unix = zeroed_storage();
        unix.ss_family = libc::AF_UNIX as libc::sa_family_t;
        assert_eq!(read_sockaddr(&unix, STORAGE_BYTES), None);
    }

    #[test]
    fn ipv4_sockets_send_without_fragmenting() {
        let any = "127.0.0.1:0".parse().unwrap();
        let s = UdpSocket::bind(any, crate::udp::SocketOptions::default()).unwrap();
        let mut mode: libc::c_int = -1;
        let mut len = size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt writes one c_int and its length, both ours.
        let rc = unsafe {
            libc::getsockopt(
                s.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_MTU_DISCOVER,
                (&mut mode as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        assert_eq!(rc, 0, "{}", io::Error::last_os_error());
        assert_eq!(mode, libc::IP_PMTUDISC_PROBE);
    }
}
