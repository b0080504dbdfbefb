//! The io_uring paths: a batch of sends or receives as submission queue entries, submitted
//! and completed in one `io_uring_enter` (with SQPOLL a kernel thread submits and the call
//! only waits).
//!
//! Which registered buffers apply to UDP: `READ_FIXED`/`WRITE_FIXED` are file operations,
//! and `RECVMSG` cannot use a fixed buffer. On the send side `SEND_ZC` takes a registered
//! buffer (`IORING_RECVSEND_FIXED_BUF`) and a destination address, so [`SendMode::ZcFixed`]
//! sends each datagram from a slot of one registered buffer, at the price of a second
//! completion per datagram (the notification that the buffer is free again). On the
//! receive side the kernel-owned equivalent is a provided-buffer ring: [`RecvMode::Multishot`]
//! arms one multishot `RECVMSG` that picks a buffer from the ring for each datagram and
//! posts one completion per datagram until cancelled.

use std::hint::black_box;
use std::io;
use std::mem;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::ptr;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use io_uring::types::{BufRingEntry, Fd, RecvMsgOut, SubmitArgs, Timespec};
use io_uring::{cqueue, opcode, IoUring};
use socket2::SockAddr;
use tickforge_io::udp::SLOT_BYTES;

use crate::run::BATCH;

/// How long one wait for completions may take before the bench gives up.
const PATIENCE: Duration = Duration::from_secs(5);
/// Submission queue entries per ring: a batch, and room to spare.
const RING_ENTRIES: u32 = 64;
/// How long the SQPOLL kernel thread polls an idle ring before it sleeps, milliseconds:
/// longer than the gap between two batches of one path, shorter than another path's sample,
/// so that it polls through its own samples and sleeps through the others'.
const SQ_THREAD_IDLE_MS: u32 = 2;
/// Buffers in the multishot receive's provided-buffer ring (a power of two).
const RING_BUFS: u16 = 64;
/// Bytes of one provided buffer: the kernel's `io_uring_recvmsg_out` header (16), room for
/// a `sockaddr_storage` (128), and a receive slot.
const RING_BUF_BYTES: usize = 2048;
/// The provided-buffer group the multishot receive picks from.
const BUF_GROUP: u16 = 7;

/// How a ring reaches the kernel.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Submit {
    /// One `io_uring_enter` per batch submits and waits. The ring runs its completion work
    /// only inside that call (`DEFER_TASKRUN`, `SINGLE_ISSUER`), as recommended for one
    /// thread per ring.
    Enter,
    /// A kernel thread polls the submission queue (`SQPOLL`), so submitting needs no
    /// system call while the thread is awake; waiting for completions still does. The
    /// thread keeps a core busy while the ring is in use and for [`SQ_THREAD_IDLE_MS`]
    /// after.
    Sqpoll,
}

fn new_ring(submit: Submit) -> io::Result<IoUring> {
    match submit {
        Submit::Enter => IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build(RING_ENTRIES),
        Submit::Sqpoll => IoUring::builder()
            .setup_sqpoll(SQ_THREAD_IDLE_MS)
            .build(RING_ENTRIES),
    }
}

/// Submits what is queued and waits in the kernel for `want` completions, at most
/// [`PATIENCE`]. With SQPOLL the poll thread submits (the call only wakes it should it
/// sleep) and the call only waits: a caller spinning on the completion queue instead,
/// beside a polling kernel thread, would hold both cores of a two-core host.
fn submit_and_wait(ring: &mut IoUring, want: usize) {
    let ts = Timespec::from(PATIENCE);
    let args = SubmitArgs::new().timespec(&ts);
    loop {
        match ring.submitter().submit_with_args(want, &args) {
            Ok(_) => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.raw_os_error() == Some(libc::ETIME) => {
                panic!("io_uring: fewer than {want} completions in {PATIENCE:?}")
            }
            Err(e) => panic!("io_uring_enter: {e}"),
        }
    }
}

/// A batch of iovecs, pointed at the buffers when a batch is submitted.
fn empty_iovecs() -> Vec<libc::iovec> {
    vec![
        libc::iovec {
            iov_base: ptr::null_mut(),
            iov_len: 0
        };
        BATCH
    ]
}

fn zeroed_msghdr() -> libc::msghdr {
    // SAFETY: msghdr is a C struct of integers and raw pointers; all-zero is a valid value.
    unsafe { mem::zeroed() }
}

fn zeroed_storage() -> libc::sockaddr_storage {
    // SAFETY: as for msghdr.
    unsafe { mem::zeroed() }
}

/// Which send operation a [`UringSend`] uses.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum SendMode {
    /// `IORING_OP_SENDMSG`, one per datagram: `sendmmsg`'s work, one entry at a time.
    SendMsg,
    /// `IORING_OP_SEND_ZC` from a registered buffer, with the destination address.
    ZcFixed,
}

/// Sends batches of datagrams through one ring.
pub struct UringSend {
    ring: IoUring,
    mode: SendMode,
    fd: RawFd,
    /// [`BATCH`] slots of [`SLOT_BYTES`]; registered as fixed buffer 0 for [`SendMode::ZcFixed`].
    data: Box<[u8]>,
    names: Vec<SockAddr>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::msghdr>,
    /// Zero-copy notifications still to come: the slots are not free until they have.
    notifications_due: usize,
}

impl UringSend {
    pub fn new(fd: RawFd, submit: Submit, mode: SendMode) -> io::Result<Self> {
        let ring = new_ring(submit)?;
        let mut data = vec![0u8; BATCH * SLOT_BYTES].into_boxed_slice();
        if mode == SendMode::ZcFixed {
            let whole = libc::iovec {
                iov_base: data.as_mut_ptr().cast(),
                iov_len: data.len(),
            };
            // SAFETY: the buffer is owned by the returned value, which owns the ring too; it
            // is not moved (a boxed slice) and outlives the ring's use of it.
            unsafe { ring.submitter().register_buffers(&[whole])? };
        }
        let any = SockAddr::from(SocketAddr::from(([0, 0, 0, 0], 0)));
        Ok(UringSend {
            ring,
            mode,
            fd,
            data,
            names: vec![any; BATCH],
            iovs: empty_iovecs(),
            hdrs: vec![zeroed_msghdr(); BATCH],
            notifications_due: 0,
        })
    }

    /// Sends one batch of [`BATCH`] copies of `payload` to `to`, copying each into its slot
    /// as `SendBatch::push` does; returns datagrams sent.
    pub fn send(&mut self, to: SocketAddr, payload: &[u8]) -> usize {
        // Last batch's slots are free once its notifications have come.
        let deadline = Instant::now() + PATIENCE;
        while self.notifications_due > 0 {
            assert!(Instant::now() < deadline, "zero-copy notifications late");
            submit_and_wait(&mut self.ring, self.notifications_due);
            for cqe in self.ring.completion() {
                debug_assert!(cqueue::notif(cqe.flags()));
                self.notifications_due -= 1;
            }
        }
        for i in 0..BATCH {
            let slot = &mut self.data[i * SLOT_BYTES..i * SLOT_BYTES + payload.len()];
            slot.copy_from_slice(payload);
            self.names[i] = SockAddr::from(to);
            let name = &self.names[i];
            let entry = match self.mode {
                SendMode::SendMsg => {
                    self.iovs[i] = libc::iovec {
                        iov_base: slot.as_mut_ptr().cast(),
                        iov_len: slot.len(),
                    };
                    let hdr = &mut self.hdrs[i];
                    hdr.msg_name = name.as_ptr().cast_mut().cast();
                    hdr.msg_namelen = name.len();
                    hdr.msg_iov = &mut self.iovs[i];
                    hdr.msg_iovlen = 1;
                    opcode::SendMsg::new(Fd(self.fd), hdr).build()
                }
                SendMode::ZcFixed => {
                    opcode::SendZc::new(Fd(self.fd), slot.as_ptr(), slot.len() as u32)
                        .buf_index(Some(0))
                        .dest_addr(name.as_ptr().cast())
                        .dest_addr_len(name.len())
                        .build()
                }
            };
            // SAFETY: every pointer in the entry (slot, address, header, iovec) points into
            // `self`, which is not touched again until the completions below are reaped
            // (for zero-copy, until the notifications are, at the start of the next batch).
            unsafe { self.ring.submission().push(&entry.user_data(i as u64)) }
                .expect("a ring of 64 entries holds a batch");
        }
        let deadline = Instant::now() + PATIENCE;
        let mut results = 0;
        let mut sent = 0;
        while results < BATCH {
            assert!(
                Instant::now() < deadline,
                "{results} of {BATCH} in {PATIENCE:?}"
            );
            submit_and_wait(&mut self.ring, BATCH - results);
            for cqe in self.ring.completion() {
                if cqueue::notif(cqe.flags()) {
                    self.notifications_due -= 1;
                    continue;
                }
                results += 1;
                if cqe.result() > 0 {
                    sent += 1;
                }
                // A zero-copy send announces its notification; it is reaped next batch,
                // as a server's next tick would.
                if cqueue::more(cqe.flags()) {
                    self.notifications_due += 1;
                }
            }
        }
        sent
    }
}

/// Which receive operation a [`UringRecv`] uses.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum RecvMode {
    /// One `IORING_OP_RECVMSG` per expected datagram, into the ring's own slots. The caller
    /// says how many wait: a lower bound for io_uring, since a server does not know.
    RecvMsg,
    /// One multishot `RECVMSG` with buffers from a provided-buffer ring, armed once; each
    /// datagram posts a completion, and its buffer goes back to the ring once read.
    Multishot,
}

/// The provided-buffer ring: entries in page-aligned memory the kernel reads, and the
/// buffers they point at.
struct BufRing {
    entries: *mut BufRingEntry,
    entries_bytes: usize,
    bufs: Box<[u8]>,
    tail: u16,
}

impl BufRing {
    fn new() -> io::Result<Self> {
        let entries_bytes = usize::from(RING_BUFS) * mem::size_of::<BufRingEntry>();
        // SAFETY: an anonymous private mapping, checked below; page-aligned as the kernel
        // requires.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                entries_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(BufRing {
            entries: p.cast(),
            entries_bytes,
            bufs: vec![0u8; usize::from(RING_BUFS) * RING_BUF_BYTES].into_boxed_slice(),
            tail: 0,
        })
    }

    fn buf(&self, bid: u16) -> &[u8] {
        let start = usize::from(bid) * RING_BUF_BYTES;
        &self.bufs[start..start + RING_BUF_BYTES]
    }

    /// Hands buffer `bid` to the kernel; [`BufRing::publish`] makes it visible.
    fn give(&mut self, bid: u16) {
        let index = usize::from(self.tail & (RING_BUFS - 1));
        let addr = self.bufs[usize::from(bid) * RING_BUF_BYTES..].as_mut_ptr() as u64;
        // SAFETY: `index` is below RING_BUFS, the mapping's length in entries.
        let entry = unsafe { &mut *self.entries.add(index) };
        entry.set_addr(addr);
        entry.set_len(RING_BUF_BYTES as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&self) {
        // SAFETY: the tail is a u16 in the first entry, inside the mapping, which the
        // kernel reads with acquire ordering.
        let tail = unsafe { &*BufRingEntry::tail(self.entries).cast::<AtomicU16>() };
        tail.store(self.tail, Ordering::Release);
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unregistered from the ring first (UringRecv's
        // drop).
        unsafe { libc::munmap(self.entries.cast(), self.entries_bytes) };
    }
}

/// Receives batches of datagrams through one ring.
pub struct UringRecv {
    ring: IoUring,
    mode: RecvMode,
    fd: RawFd,
    /// Receive slots for [`RecvMode::RecvMsg`].
    data: Box<[u8]>,
    names: Vec<libc::sockaddr_storage>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::msghdr>,
    /// The multishot receive's template: only its name and control lengths count.
    multishot_hdr: libc::msghdr,
    bufs: Option<BufRing>,
    armed: bool,
}

impl UringRecv {
    pub fn new(fd: RawFd, submit: Submit, mode: RecvMode) -> io::Result<Self> {
        let ring = new_ring(submit)?;
        let mut multishot_hdr = zeroed_msghdr();
        multishot_hdr.msg_namelen = mem::size_of::<libc::sockaddr_storage>() as _;
        let bufs = if mode == RecvMode::Multishot {
            let mut bufs = BufRing::new()?;
            // SAFETY: the entries stay mapped until the ring has unregistered them (drop).
            unsafe {
                ring.submitter().register_buf_ring_with_flags(
                    bufs.entries as u64,
                    RING_BUFS,
                    BUF_GROUP,
                    0,
                )?
            };
            for bid in 0..RING_BUFS {
                bufs.give(bid);
            }
            bufs.publish();
            Some(bufs)
        } else {
            None
        };
        Ok(UringRecv {
            ring,
            mode,
            fd,
            data: vec![0u8; BATCH * SLOT_BYTES].into_boxed_slice(),
            names: vec![zeroed_storage(); BATCH],
            iovs: empty_iovecs(),
            hdrs: vec![zeroed_msghdr(); BATCH],
            multishot_hdr,
            bufs,
            armed: false,
        })
    }

    /// Receives until `want` datagrams (at most [`BATCH`]) have come, reading each one's
    /// source address and bytes; returns how many came.
    pub fn recv(&mut self, want: usize) -> usize {
        debug_assert!(want <= BATCH);
        match self.mode {
            RecvMode::RecvMsg => self.recv_each(want),
            RecvMode::Multishot => self.recv_multishot(want),
        }
    }

    fn recv_each(&mut self, want: usize) -> usize {
        let deadline = Instant::now() + PATIENCE;
        let mut got = 0;
        while got < want {
            assert!(Instant::now() < deadline, "{got} of {want} in {PATIENCE:?}");
            let ask = want - got;
            for i in 0..ask {
                let slot = &mut self.data[i * SLOT_BYTES..(i + 1) * SLOT_BYTES];
                self.iovs[i] = libc::iovec {
                    iov_base: slot.as_mut_ptr().cast(),
                    iov_len: slot.len(),
                };
                let hdr = &mut self.hdrs[i];
                hdr.msg_name = (&mut self.names[i] as *mut libc::sockaddr_storage).cast();
                hdr.msg_namelen = mem::size_of::<libc::sockaddr_storage>() as _;
                hdr.msg_iov = &mut self.iovs[i];
                hdr.msg_iovlen = 1;
                let entry = opcode::RecvMsg::new(Fd(self.fd), hdr)
                    .build()
                    .user_data(i as u64);
                // SAFETY: the header, its iovec, slot and address all live in `self`, which
                // is not touched again until these completions are reaped below.
                unsafe { self.ring.submission().push(&entry) }
                    .expect("a ring of 64 entries holds a batch");
            }
            submit_and_wait(&mut self.ring, ask);
            for cqe in self.ring.completion() {
                let i = cqe.user_data() as usize;
                let n = cqe.result();
                if n < 0 {
                    continue;
                }
                let hdr = &self.hdrs[i];
                // SAFETY: the kernel wrote `msg_namelen` bytes of address into the storage.
                let from = unsafe { SockAddr::new(self.names[i], hdr.msg_namelen) }.as_socket();
                black_box((
                    from,
                    &self.data[i * SLOT_BYTES..i * SLOT_BYTES + n as usize],
                ));
                got += 1;
            }
        }
        got
    }

    fn recv_multishot(&mut self, want: usize) -> usize {
        let deadline = Instant::now() + PATIENCE;
        let mut got = 0;
        while got < want {
            assert!(Instant::now() < deadline, "{got} of {want} in {PATIENCE:?}");
            if !self.armed {
                let entry = opcode::RecvMsgMulti::new(Fd(self.fd), &self.multishot_hdr, BUF_GROUP)
                    .build()
                    .user_data(u64::MAX);
                // SAFETY: the template header lives in `self` for as long as the ring.
                unsafe { self.ring.submission().push(&entry) }.expect("room for one entry");
                self.armed = true;
            }
            // One, not `want - got`: with DEFER_TASKRUN the kernel wakes a waiter once as
            // many task-work items as it waits for are queued, and one item of a multishot
            // receive can carry several datagrams, so a wait for more than one could sleep
            // until its timeout. Datagrams already waiting all complete in this one call.
            submit_and_wait(&mut self.ring, 1);
            let bufs = self.bufs.as_mut().expect("a multishot ring has buffers");
            for cqe in self.ring.completion() {
                if !cqueue::more(cqe.flags()) {
                    self.armed = false;
                }
                let Some(bid) = cqueue::buffer_select(cqe.flags()) else {
                    // No buffer: an error (ENOBUFS when the ring ran dry) ended the receive.
                    continue;
                };
                let n = usize::try_from(cqe.result()).unwrap_or(0);
                let buf = &bufs.buf(bid)[..n.min(RING_BUF_BYTES)];
                if let Ok(out) = RecvMsgOut::parse(buf, &self.multishot_hdr) {
                    let mut storage = zeroed_storage();
                    let name = out.name_data();
                    let len = name.len().min(mem::size_of::<libc::sockaddr_storage>());
                    // SAFETY: `len` bytes fit in both the name and the storage.
                    unsafe {
                        ptr::copy_nonoverlapping(
                            name.as_ptr(),
                            (&mut storage as *mut libc::sockaddr_storage).cast::<u8>(),
                            len,
                        )
                    };
                    // SAFETY: the storage holds the `len` bytes the kernel wrote.
                    let from = unsafe { SockAddr::new(storage, len as libc::socklen_t) };
                    black_box((from.as_socket(), out.payload_data()));
                    got += 1;
                }
                bufs.give(bid);
            }
            bufs.publish();
        }
        got
    }
}

impl Drop for UringRecv {
    fn drop(&mut self) {
        if self.bufs.is_some() {
            let _ = self.ring.submitter().unregister_buf_ring(BUF_GROUP);
        }
    }
}
